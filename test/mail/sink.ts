import type { AddressInfo } from 'node:net';
import { SMTPServer } from 'smtp-server';
import { simpleParser, type ParsedMail } from 'mailparser';

/** An email as the sink took it: the envelope's recipients and the parsed message. */
export interface Captured {
  to: string[];
  mail: ParsedMail;
  raw: string;
}

export interface Sink {
  port: number;
  url: string;
  captured: Captured[];
  /** Messages whose DATA arrived but are not answered yet (`hold`). */
  readonly holding: number;
  /** Answers every held message (250), and from now on answers at once. */
  release(): void;
  close(): Promise<void>;
}

/**
 * A real SMTP server on 127.0.0.1 that keeps what it is sent (smtp-server, from nodemailer's
 * authors): no STARTTLS, no authentication. With `hold`, it reads each message and answers nothing
 * until `release()`: a relay that has stopped answering.
 */
export async function startSink(opts: { port?: number; hold?: boolean } = {}): Promise<Sink> {
  const captured: Captured[] = [];
  let hold = opts.hold ?? false;
  const waiting: (() => void)[] = [];
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS', 'AUTH'],
    logger: false,
    // A held connection would otherwise be closed by the server before the test releases it.
    socketTimeout: 120_000,
    // The sender's pool keeps its connections open: a close cuts them instead of waiting 30 s for them.
    closeTimeout: 200,
    onData(stream, session, callback) {
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('end', () => {
        const raw = Buffer.concat(chunks).toString('utf8');
        const to = session.envelope.rcptTo.map((r) => r.address);
        const finish = () =>
          void simpleParser(raw).then((mail) => {
            captured.push({ to, mail, raw });
            callback();
          }, callback);
        if (hold) waiting.push(finish);
        else finish();
      });
    },
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 0, '127.0.0.1', () => resolve());
  });
  const port = (server.server.address() as AddressInfo).port;
  return {
    port,
    url: `smtp://127.0.0.1:${port}`,
    captured,
    get holding() {
      return waiting.length;
    },
    release() {
      hold = false;
      for (const w of waiting.splice(0)) w();
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
