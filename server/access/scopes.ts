import { invalid } from '../platform/errors';

export const SCOPES = ['conversations:read', 'conversations:write', 'media:read'] as const;
export type Scope = (typeof SCOPES)[number];

export function parseScopes(text: string): Scope[] {
  const list = text
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  if (list.length === 0) throw invalid(`At least one right is needed: ${SCOPES.join(', ')}.`);
  for (const s of list) {
    if (!(SCOPES as readonly string[]).includes(s)) throw invalid(`Unknown right "${s}"; the rights are ${SCOPES.join(', ')}.`);
  }
  return [...new Set(list)] as Scope[];
}
