/**
 * The placeholders of a shared reply (docs/dashboard.md, "Shared replies"), filled in when a member
 * inserts the reply into a conversation. Pure: the values come from the caller.
 *
 *   {visitor.name}        the visitor's display name (server/visitors/display-name.ts)
 *   {visitor.firstName}   its first word
 *   {agent.name}          the name the chat window shows on the inserting member's replies
 *   {site.name}           the site's name
 *
 * `{visitor.name|there}` gives a fallback, used when the visitor never said its name: the inbox's
 * friendly name ("Brave Otter") is a label for members that the visitor has never seen. Other
 * braces are text: `{order}` stays `{order}`; a known namespace with an unknown field
 * (`{visitor.nmae}`) is refused when the reply is saved, so a typo never reaches a visitor.
 */

export const PLACEHOLDERS = ['visitor.name', 'visitor.firstName', 'agent.name', 'site.name'] as const;
export type Placeholder = (typeof PLACEHOLDERS)[number];

/** `{namespace.field}` or `{namespace.field|fallback}`; the fallback is one line of at most 60 characters without braces. */
const PATTERN = /\{(visitor|agent|site)\.([A-Za-z]+)(?:\|([^{}\r\n]{0,60}))?\}/g;

export interface PlaceholderValues {
  visitor: {
    name: string;
    /** Whether the name is the visitor's own (verified or given by the page), not the generated one. */
    own: boolean;
  };
  agentName: string;
  siteName: string;
}

/** The placeholders of `body` that name no known field (`visitor.nmae`), each once, in order. */
export function unknownPlaceholders(body: string): string[] {
  const found = new Set<string>();
  for (const m of body.matchAll(PATTERN)) {
    const name = `${m[1]}.${m[2]}`;
    if (!(PLACEHOLDERS as readonly string[]).includes(name)) found.add(name);
  }
  return [...found];
}

const firstWord = (name: string) => name.trim().split(/\s+/u)[0] ?? name;

/** `body` with each known placeholder replaced by its value; unknown ones are left as written. */
export function fillPlaceholders(body: string, values: PlaceholderValues): string {
  return body.replace(PATTERN, (whole, ns: string, field: string, fallback: string | undefined) => {
    switch (`${ns}.${field}`) {
      case 'visitor.name':
        return !values.visitor.own && fallback !== undefined ? fallback : values.visitor.name;
      case 'visitor.firstName':
        return !values.visitor.own && fallback !== undefined ? fallback : values.visitor.own ? firstWord(values.visitor.name) : values.visitor.name;
      case 'agent.name':
        return values.agentName;
      case 'site.name':
        return values.siteName;
      default:
        return whole;
    }
  });
}
