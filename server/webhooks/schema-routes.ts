import { Router } from 'express';
import fs from 'node:fs';
import path from 'node:path';
import { EVENT_NAMES } from './outbox';
import { fromProjectRoot } from '../platform/project-root';

/** The published event schemas (generated into sdk/schemas by scripts/generate.ts), served as files. */
export function schemaRoutes(schemaDir = fromProjectRoot('sdk', 'schemas')): Router {
  const router = Router();
  router.get('/schemas', (_req, res) => {
    res.json({ data: EVENT_NAMES.map((event) => ({ event, url: `/api/v1/schemas/${event}.json` })) });
  });
  router.get('/schemas/:schemaName', (req, res, next) => {
    const file = path.join(schemaDir, path.basename(req.params.schemaName));
    fs.readFile(file, (err, bytes) => {
      if (err) return next(err);
      res.status(200).type('application/schema+json').send(bytes);
    });
  });
  return router;
}
