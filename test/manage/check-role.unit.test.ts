import { checkRole } from '../../server/accounts/members';
import { ApiError } from '../../server/platform/errors';

/** The role step's judgement of a membership read with the credential (server/manage/roles.ts). */
const judged = (role: 'owner' | 'agent' | null, needed: 'owner' | 'member') => {
  try {
    return checkRole(role, needed);
  } catch (err) {
    return err instanceof ApiError ? `${err.status} ${err.code}` : err;
  }
};

test('no membership is 404 whatever the operation needs: another site is not shown', () => {
  expect(judged(null, 'member')).toBe('404 not_found');
  expect(judged(null, 'owner')).toBe('404 not_found');
});

test('an agent passes a member operation and is refused an owner operation with 403', () => {
  expect(judged('agent', 'member')).toBe('agent');
  expect(judged('agent', 'owner')).toBe('403 forbidden');
});

test('an owner passes both', () => {
  expect(judged('owner', 'member')).toBe('owner');
  expect(judged('owner', 'owner')).toBe('owner');
});
