/**
 * The openapi-fetch client of /manage/v1, typed from openapi/manage.yaml
 * (server/manage/generated/api.ts). Pages reach it through api.ts, whose `call` handles failures;
 * session.ts uses it directly to ask whether the browser is signed in.
 */
import createClient from 'openapi-fetch';
import type { paths } from '../../manage/generated/api';

/** Same-origin cookies (the session is `__Host-session`, HttpOnly); no Authorization header. */
export const client = createClient<paths>({ baseUrl: '/manage/v1', credentials: 'same-origin' });
