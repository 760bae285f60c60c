import { CliError, Command, required, SITE_OPTION } from '../args';
import { parseScopes } from '../../access/scopes';

export const keyCommands: Record<string, Command> = {
  'key create': {
    summary: 'Makes an API key of the site with the given scopes; the key is shown once.',
    options: [
      SITE_OPTION,
      { name: 'scopes', value: 'a,b', help: 'conversations:read, conversations:write, media:read (comma-separated)' },
      { name: 'label', value: 'L', help: 'a name for the key' },
    ],
    run: async (rt, args) => {
      const scopes = parseScopes(required(args, 'scopes'));
      const label = typeof args.flags.label === 'string' ? args.flags.label : undefined;
      const key = await rt.services.access.createKey(required(args, 'site'), scopes, label, { also: rt.services.siteAdmin.byOperator('key.created') });
      return {
        json: key,
        text: `key ${key.id} created with ${key.scopes.join(', ')}\n\n  ${key.key}\n\nThis is the only time the key is shown; only its fingerprint is stored.`,
      };
    },
  },
  'key list': {
    summary: 'Lists the API keys of a site, without secrets.',
    options: [SITE_OPTION],
    run: async (rt, args) => {
      const keys = await rt.services.access.listKeys(required(args, 'site'));
      return {
        json: { keys },
        text: keys.map((k) => `${k.id}  ${k.prefix}…  ${k.scopes.join(',')}  ${k.revokedAt ? 'revoked ' + k.revokedAt : 'active'}`).join('\n') || '(no keys)',
      };
    },
  },
  'key revoke': {
    summary: 'Revokes an API key at once.',
    operands: '<key id>',
    options: [],
    run: async (rt, args) => {
      const id = args.positional[0];
      if (!id) throw new CliError('usage: key revoke <key id>');
      const revoked = await rt.services.access.revokeKey(id, { also: rt.services.siteAdmin.byOperator('key.revoked') });
      return { json: revoked, text: `key ${revoked.id} revoked at ${revoked.revokedAt}` };
    },
  },
};
