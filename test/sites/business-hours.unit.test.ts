import { checkBusinessHours, DEFAULT_BUSINESS_HOURS, instantOf, isOpen, nextOpening, type BusinessHours } from '../../server/sites/business-hours';

const weekdays = (ranges: [string, string][]) => ({ mon: ranges, tue: ranges, wed: ranges, thu: ranges, fri: ranges, sat: [], sun: [] });
const berlin: BusinessHours = {
  enabled: true,
  timeZone: 'Europe/Berlin',
  week: weekdays([
    ['09:00', '12:00'],
    ['13:00', '17:00'],
  ]),
  awayMessage: 'Back soon',
  awayWhenNoAgentOnline: true,
};
const at = (iso: string) => Date.parse(iso);

describe('business hours', () => {
  test('open inside a range in the site zone, closed in the lunch gap, at the end minute and on days off', () => {
    // Winter: Berlin is UTC+1. Wednesday 2026-11-25.
    expect(isOpen(berlin, at('2026-11-25T08:00:00Z'))).toBe(true); // 09:00 local
    expect(isOpen(berlin, at('2026-11-25T07:59:00Z'))).toBe(false);
    expect(isOpen(berlin, at('2026-11-25T11:30:00Z'))).toBe(false); // 12:30 local
    expect(isOpen(berlin, at('2026-11-25T15:59:00Z'))).toBe(true);
    expect(isOpen(berlin, at('2026-11-25T16:00:00Z'))).toBe(false); // 17:00 local: the end is excluded
    expect(isOpen(berlin, at('2026-11-28T10:00:00Z'))).toBe(false); // Saturday
  });

  test('hours turned off are always open', () => {
    expect(isOpen({ ...berlin, enabled: false }, at('2026-11-28T03:00:00Z'))).toBe(true);
    expect(isOpen(DEFAULT_BUSINESS_HOURS, 0)).toBe(true);
  });

  test('the next opening: after lunch, the next morning, over the weekend', () => {
    expect(nextOpening(berlin, at('2026-11-25T11:30:00Z'))).toBe(at('2026-11-25T12:00:00Z'));
    expect(nextOpening(berlin, at('2026-11-25T20:00:00Z'))).toBe(at('2026-11-26T08:00:00Z'));
    expect(nextOpening(berlin, at('2026-11-27T17:00:00Z'))).toBe(at('2026-11-30T08:00:00Z')); // Friday evening -> Monday
    expect(nextOpening(berlin, at('2026-11-25T10:00:00Z'))).toBe(at('2026-11-25T10:00:00Z')); // open now
    expect(nextOpening({ ...berlin, week: weekdays([]) }, at('2026-11-25T10:00:00Z'))).toBeNull();
  });

  test('DST: the same wall hours are other instants in summer, and the change night is handled', () => {
    // Summer: UTC+2.
    expect(isOpen(berlin, at('2026-07-01T07:00:00Z'))).toBe(true); // 09:00 local
    expect(isOpen(berlin, at('2026-07-01T06:59:00Z'))).toBe(false);
    // Friday 2026-03-27 evening to Monday 2026-03-30, over the change of Sunday 29 March (02:00 -> 03:00).
    expect(nextOpening(berlin, at('2026-03-27T18:00:00Z'))).toBe(at('2026-03-30T07:00:00Z'));
    // A wall time in the spring gap opens at the jump; one that occurs twice in autumn, at the first.
    expect(instantOf({ year: 2026, month: 3, day: 29, minute: 150 }, 'Europe/Berlin')).toBe(at('2026-03-29T01:00:00Z'));
    expect(instantOf({ year: 2026, month: 10, day: 25, minute: 150 }, 'Europe/Berlin')).toBe(at('2026-10-25T00:30:00Z'));
    const sunday = { ...berlin, week: { ...berlin.week, sun: [['02:30', '04:00']] as [string, string][] } };
    expect(nextOpening(sunday, at('2026-03-28T23:00:00Z'))).toBe(at('2026-03-29T01:00:00Z'));
    expect(isOpen(sunday, at('2026-03-29T01:00:00Z'))).toBe(true);
  });

  test('a zone west of UTC: the local day is not the UTC day', () => {
    const ny: BusinessHours = { ...berlin, timeZone: 'America/New_York', week: { ...weekdays([]), fri: [['20:00', '24:00']] } };
    // Saturday 01:30 UTC is Friday 20:30 in New York.
    expect(isOpen(ny, at('2026-11-28T01:30:00Z'))).toBe(true);
    expect(isOpen(ny, at('2026-11-28T05:00:00Z'))).toBe(false); // midnight local: the end excluded
  });

  test('checks: unknown zones, bad times, overlaps and reversed ranges each named', () => {
    expect(checkBusinessHours({ ...berlin, timeZone: 'europe/berlin' }).timeZone).toBe('Europe/Berlin');
    const bad = () =>
      checkBusinessHours({
        ...berlin,
        timeZone: 'Mars/Olympus',
        week: {
          ...weekdays([]),
          mon: [
            ['09:00', '12:00'],
            ['11:00', '13:00'],
          ],
          tue: [['18:00', '02:00']],
          wed: [['9:00', '10:00']],
        },
      });
    expect(bad).toThrow('The business hours are not valid.');
    try {
      bad();
    } catch (err) {
      const paths = (err as { details: { path: string }[] }).details.map((d) => d.path);
      expect(paths).toEqual(['/body/timeZone', '/body/week/mon/1', '/body/week/tue/0', '/body/week/wed/0']);
    }
  });
});
