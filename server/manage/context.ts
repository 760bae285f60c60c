import type { Request, Response } from 'express';
import type { components } from './generated/api';
import type { Manager, SignedActor } from '../accounts/common';

export type Schemas = components['schemas'];
export type Body<T extends keyof Schemas> = Schemas[T];

declare global {
  // eslint-disable-next-line @typescript-eslint/no-namespace
  namespace Express {
    interface Request {
      /** The signed-in account (management entry only). */
      manager?: Manager;
    }
  }
}

/** What the management routes read off a request the entry has authenticated and validated. */
export const signedIn = (req: Request) => req.manager!;
export const actor = (req: Request): SignedActor => ({ manager: signedIn(req), clientIp: req.ip ?? null });
export const meta = (req: Request) => ({ userAgent: req.headers['user-agent'], clientIp: req.ip ?? null });
export const send = <T extends keyof Schemas>(res: Response, status: number, body: Body<T>) => res.status(status).json(body);
