// Tests never print the access log; failures are asserted, not read from logs.
process.env.LOG_LEVEL = process.env.LOG_LEVEL || 'silent';
