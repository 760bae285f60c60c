import type { Command } from '../args';
import { siteCommands } from './sites';
import { keyCommands } from './keys';
import { chatCommands } from './chat';
import { webhookCommands } from './webhooks';
import { visitorCommands } from './visitors';
import { accountCommands } from './accounts';
import { tagCommands } from './tags';
import { sharedReplyCommands } from './replies';

/** Every command of the operator CLI by its name (two words), each with its options' one definition. */
export const commands: Record<string, Command> = {
  ...siteCommands,
  ...keyCommands,
  ...chatCommands,
  ...webhookCommands,
  ...visitorCommands,
  ...accountCommands,
  ...tagCommands,
  ...sharedReplyCommands,
};
