import { assignmentRefusal } from '../../server/inbox/service';

const A = 'usr_agent';
const B = 'usr_other';

describe('who may assign a conversation', () => {
  test.each([
    ['owner', A, null, B, true],
    ['owner', A, B, null, true],
    ['owner', A, B, A, true],
    ['agent', A, null, A, true], // takes an unassigned one
    ['agent', A, B, A, true], // takes over
    ['agent', A, A, null, true], // lets go of their own
    ['agent', A, null, B, false], // hands it to someone else
    ['agent', A, A, B, false],
    ['agent', A, B, null, false], // unassigns another's
    ['agent', A, null, null, false],
  ] as const)('%s %s: %s -> %s allowed=%s', (role, actor, current, next, allowed) => {
    expect(assignmentRefusal(role, actor, current, next) === null).toBe(allowed);
  });
});
