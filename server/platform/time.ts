/** Database rows keep times as integer milliseconds since the epoch: exact, sortable and the same on SQLite and MySQL. */
export function toIso(ms: number | string | null | undefined): string | null {
  if (ms === null || ms === undefined) return null;
  return new Date(Number(ms)).toISOString();
}

export function toIsoRequired(ms: number | string): string {
  return new Date(Number(ms)).toISOString();
}

export function parseIsoToMs(value: string): number {
  return Date.parse(value);
}
