/**
 * A message's time: the hour for today's, the date and hour for older ones (a conversation picked
 * up the next day reads "12 Mar, 14:05", never a bare "14:05"); the full date and time on hover.
 */
export function timeText(d: Date, now = new Date(), locale?: string): string {
  const hour = d.toLocaleTimeString(locale, { hour: '2-digit', minute: '2-digit' });
  if (d.toDateString() === now.toDateString()) return hour;
  const date = d.toLocaleDateString(
    locale,
    d.getFullYear() === now.getFullYear() ? { day: 'numeric', month: 'short' } : { day: 'numeric', month: 'short', year: 'numeric' },
  );
  return `${date}, ${hour}`;
}
