/** Database rows keep times as integer milliseconds since the epoch: exact, sortable and the same on SQLite and MySQL. */
export function toIsoRequired(ms: number | string): string {
  return new Date(Number(ms)).toISOString();
}

export function toIso(ms: number | string | null | undefined): string | null {
  return ms === null || ms === undefined ? null : toIsoRequired(ms);
}
