import type { Request, RequestHandler } from 'express';
import { ApiError } from '../platform/errors';
import type { Scope } from '../access/scopes';
import { openApiDocument } from './openapi-document';
import './request-context';

type SecurityRequirement = Record<string, string[]>;

/** 401 or 403 for a request against an operation's security requirements, or null when it may pass. */
function refusal(req: Request, security: SecurityRequirement[] | undefined): ApiError | null {
  if (!security || security.length === 0) return null; // public operation
  if (!req.principal) {
    if (req.mediaLink && security.some((s) => 'mediaLink' in s)) return null;
    return new ApiError('unauthorized', 'Missing API key: send Authorization: Bearer wck_...');
  }
  const needed = security.find((s) => 'apiKey' in s)?.apiKey ?? [];
  const missing = needed.filter((s) => !req.principal!.scopes.includes(s as Scope));
  if (missing.length) return new ApiError('insufficient_scope', `This key lacks the ${missing.join(', ')} right.`);
  return null;
}

/**
 * Rights come from the document: the scopes of the operation's `apiKey` security requirement.
 * Runs after the validator has matched the operation.
 */
export const requireScopes: RequestHandler = (req, _res, next) => {
  const schema = (req as Request & { openapi?: { schema?: { security?: SecurityRequirement[] } } }).openapi?.schema;
  next(refusal(req, schema?.security) ?? undefined);
};

interface DocumentedOperation {
  security: SecurityRequirement[] | undefined;
  /** Path parameter name -> the pattern of its schema. */
  pathPatterns: Map<string, string>;
}

/** What the document says about one operation that can be checked without its body. */
export function documentedOperation(method: string, documentPath: string): DocumentedOperation {
  const doc = openApiDocument() as { security?: SecurityRequirement[]; paths: Record<string, Record<string, unknown>> };
  const resolve = <T>(node: T): T => {
    let current = node as { $ref?: string };
    for (let depth = 0; current?.$ref && depth < 10; depth++) {
      current = current.$ref
        .replace(/^#\//, '')
        .split('/')
        .reduce<unknown>((at, key) => (at as Record<string, unknown>)[key.replace(/~1/g, '/').replace(/~0/g, '~')], doc) as { $ref?: string };
    }
    return current as T;
  };
  const pathItem = doc.paths[documentPath];
  const operation = pathItem?.[method.toLowerCase()] as { security?: SecurityRequirement[]; parameters?: unknown[] } | undefined;
  if (!operation) throw new Error(`the document has no ${method.toUpperCase()} ${documentPath}`);
  const pathPatterns = new Map<string, string>();
  for (const p of [...((pathItem.parameters as unknown[]) ?? []), ...(operation.parameters ?? [])]) {
    const param = resolve(p as { name: string; in: string; schema?: unknown });
    const pattern = resolve(param.schema as { pattern?: string } | undefined)?.pattern;
    if (param.in === 'path' && pattern) pathPatterns.set(param.name, pattern);
  }
  return { security: operation.security ?? doc.security, pathPatterns };
}

/**
 * For an operation whose body is expensive to read (a multipart upload is spooled to disk, up to
 * 10 files of 20 MiB): the checks that need no body (path ids as the validator would check them,
 * the key's rights, and optionally that the addressed resource exists for the key's site) run
 * before the body is read, so a request refused anyway costs no disk. Other bodies take the usual
 * order (validator, then rights).
 */
export function checkBeforeUpload(
  method: string,
  documentPath: string,
  exists?: (siteId: string, params: Record<string, string>) => Promise<unknown>,
): RequestHandler {
  const operation = documentedOperation(method, documentPath);
  const patterns = [...operation.pathPatterns].map(([name, pattern]) => ({ name, pattern, regex: new RegExp(pattern, 'u') }));
  return async (req, _res, next) => {
    if (!req.is('multipart/form-data')) return next();
    try {
      for (const { name, pattern, regex } of patterns) {
        const value = String(req.params[name] ?? '');
        if (!regex.test(value)) {
          const message = `must match pattern "${pattern}"`;
          throw new ApiError('invalid_request', `request/params/${name} ${message}`, [{ path: `/params/${name}`, message }]);
        }
      }
      const refused = refusal(req, operation.security);
      if (refused) throw refused;
      if (exists && req.principal) await exists(req.principal.siteId, req.params as Record<string, string>);
      next();
    } catch (err) {
      next(err);
    }
  };
}
