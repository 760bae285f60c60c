import fs from 'node:fs';
import path from 'node:path';
import { Command, required, SITE_OPTION } from '../args';
import type { IncomingFile } from '../../media/service';

const MIME_BY_EXT: Record<string, string> = {
  '.png': 'image/png',
  '.jpg': 'image/jpeg',
  '.jpeg': 'image/jpeg',
  '.gif': 'image/gif',
  '.webp': 'image/webp',
  '.pdf': 'application/pdf',
  '.txt': 'text/plain',
  '.csv': 'text/csv',
  '.json': 'application/json',
};

function readFiles(paths: string[]): IncomingFile[] {
  return paths.map((p) => ({
    buffer: fs.readFileSync(p),
    originalName: path.basename(p),
    mimeType: MIME_BY_EXT[path.extname(p).toLowerCase()] ?? 'application/octet-stream',
  }));
}

export const chatCommands: Record<string, Command> = {
  /** The chat window's own path (services.window.chat): starts a conversation exactly as a visitor does. */
  'visitor say': {
    summary: "Sends a visitor's message through the chat window's own path (starts a conversation if none is open).",
    options: [
      SITE_OPTION,
      { name: 'visitor', value: 'V', help: "the visitor's id" },
      { name: 'content', value: 'C', help: 'the text of the message' },
      { name: 'file', value: 'F', help: 'a file to attach', repeats: true },
    ],
    run: async (rt, args) => {
      const result = await rt.services.window.chat.visitorSay(required(args, 'site'), required(args, 'visitor'), String(args.flags.content ?? ''), {
        files: readFiles(args.lists.file ?? []),
      });
      const { conversation, message } = result;
      return {
        json: { conversation, message },
        text: `${result.started ? 'started' : 'continued'} ${conversation.id}; message ${message.id}`,
      };
    },
  },
  'agent say': {
    summary: 'Replies in a conversation as an agent (origin messenger).',
    options: [
      { name: 'conversation', value: 'C', help: 'the conversation (conv_...)' },
      { name: 'content', value: 'C', help: 'the text of the reply' },
    ],
    run: async (rt, args) => {
      const { conversation, message } = await rt.services.window.chat.agentSay(required(args, 'conversation'), required(args, 'content'));
      return { json: { conversation, message }, text: `message ${message.id} in ${conversation.id}` };
    },
  },
};
