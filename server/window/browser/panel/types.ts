/** The panel's view of the window entry's document (openapi/window.yaml): types only, gone at build. */
import type { components, operations } from '../../generated/api';

type Schemas = components['schemas'];

export type Message = Schemas['WindowMessage'];
export type Conversation = Schemas['Conversation'];
export type TokenRequest = Schemas['TokenRequest'];
export type TokenAnswer = Schemas['TokenResponse']['data'];
export type SendAnswer = Schemas['SendResponse']['data'];
export type PageOfMessages = operations['listWindowMessages']['responses'][200]['content']['application/json'];
export type CurrentConversation = operations['getCurrentConversation']['responses'][200]['content']['application/json']['data'];

/** A signed-in user as the host page vouches for it (the loader passes it on): a user id and its hash, or an identity token. */
export type Identity = Required<Pick<TokenRequest, 'userId' | 'userHash'>> | Required<Pick<TokenRequest, 'identityToken'>>;
