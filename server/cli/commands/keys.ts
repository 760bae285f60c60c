import { CliError, Command, required } from '../args';
import { parseScopes } from '../../access/scopes';

export const keyCommands: Record<string, Command> = {
  'key create': async (rt, args) => {
    const scopes = parseScopes(required(args, 'scopes'));
    const label = typeof args.flags.label === 'string' ? args.flags.label : undefined;
    const key = await rt.services.access.createKey(required(args, 'site'), scopes, label, { also: rt.services.siteAdmin.byOperator('key.created') });
    return {
      json: key,
      text: `key ${key.id} created with ${key.scopes.join(', ')}\n\n  ${key.key}\n\nThis is the only time the key is shown; only its fingerprint is stored.`,
    };
  },
  'key list': async (rt, args) => {
    const keys = await rt.services.access.listKeys(required(args, 'site'));
    return {
      json: { keys },
      text: keys.map((k) => `${k.id}  ${k.prefix}…  ${k.scopes.join(',')}  ${k.revokedAt ? 'revoked ' + k.revokedAt : 'active'}`).join('\n') || '(no keys)',
    };
  },
  'key revoke': async (rt, args) => {
    const id = args.positional[0];
    if (!id) throw new CliError('usage: key revoke <key id>');
    const revoked = await rt.services.access.revokeKey(id, { also: rt.services.siteAdmin.byOperator('key.revoked') });
    return { json: revoked, text: `key ${revoked.id} revoked at ${revoked.revokedAt}` };
  },
};
