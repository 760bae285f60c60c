export class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
    /** The gateway refused for good: asking again cannot help. */
    readonly final = false,
  ) {
    super(message);
  }
}

/** What a refusal without the service's envelope (a proxy's page) means to a visitor. */
const PLAIN_REFUSALS: Record<number, string> = {
  413: 'The message or its files are too large.',
  507: 'The chat service has no room for files right now.',
};

/** The refusal in words: the envelope's `error.message` (quotas, types, sizes say why there). */
export async function errorOf(res: Response, final = false): Promise<HttpError> {
  let message = PLAIN_REFUSALS[res.status] ?? `The chat service answered ${res.status}.`;
  try {
    const body = await res.json();
    if (typeof body?.error?.message === 'string') message = body.error.message;
  } catch {
    // not JSON
  }
  return new HttpError(res.status, message, final);
}
