/**
 * A TCP proxy between the browser and the service that breaks connections the ways networks do:
 * `cut()` resets every connection (network loss, a proxy or a server restarting), `down` refuses
 * new ones meanwhile, and `freeze()` makes the open ones silent without closing them (a laptop's
 * sleep, a proxy that dropped the connection's state). A frozen connection the client writes to is
 * reset, as a NAT answers a flow it forgot, so only a connection that waits (the live stream) stays
 * silent. TLS passes through untouched.
 */
import net from 'node:net';

export interface CutProxy {
  port: number;
  /** Where new connections go (another instance of the service after a "restart"). */
  target: number;
  /** Refuse new connections while true. */
  down: boolean;
  /** Connections accepted so far. */
  accepted: number;
  cut(): void;
  freeze(): void;
  close(): Promise<void>;
}

export async function cutProxy(targetPort: number): Promise<CutProxy> {
  const open = new Set<{ client: net.Socket; server: net.Socket; frozen: boolean }>();
  const proxy: CutProxy = {
    port: 0,
    target: targetPort,
    down: false,
    accepted: 0,
    cut() {
      for (const c of open) {
        c.client.resetAndDestroy();
        c.server.destroy();
      }
      open.clear();
    },
    freeze() {
      for (const c of open) c.frozen = true;
    },
    close: () =>
      new Promise<void>((resolve) => {
        proxy.cut();
        listener.close(() => resolve());
      }),
  };
  const listener = net.createServer((client) => {
    if (proxy.down) return void client.resetAndDestroy();
    proxy.accepted++;
    const server = net.connect(proxy.target, '127.0.0.1');
    const c = { client, server, frozen: false };
    open.add(c);
    const end = () => {
      open.delete(c);
      if (!client.destroyed) client.destroy();
      if (!server.destroyed) server.destroy();
    };
    client.on('data', (b) => {
      if (!c.frozen) return void server.write(b);
      open.delete(c);
      client.resetAndDestroy();
      server.destroy();
    });
    server.on('data', (b) => {
      if (!c.frozen) client.write(b);
    });
    client.on('close', end).on('error', end);
    server.on('close', end).on('error', end);
  });
  await new Promise<void>((resolve) => listener.listen(0, '127.0.0.1', resolve));
  proxy.port = (listener.address() as net.AddressInfo).port;
  return proxy;
}
