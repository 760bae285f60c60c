// The container's health check: this instance's GET /readyz answers 200. Run inside the container
// against its own port, so the certificate (made for the public host name) is not checked.
const https = require('node:https');

https
  .get({ host: '127.0.0.1', port: Number(process.env.PORT ?? 8443), path: '/readyz', rejectUnauthorized: false, timeout: 4000 }, (res) =>
    process.exit(res.statusCode === 200 ? 0 : 1),
  )
  .on('error', () => process.exit(1))
  .on('timeout', () => process.exit(1));
