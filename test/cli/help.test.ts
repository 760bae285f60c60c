/** The CLI's own help and usage mistakes, as an operator meets them: separate processes. */
import { adminCli, AdminCli } from '../helpers/admin-cli';

let cli: AdminCli;
beforeAll(async () => {
  cli = await adminCli();
});
afterAll(() => cli.close());

test("webhook set --help prints that command's usage, every option and the settings read from the CLI's own environment", async () => {
  const r = await cli.admin(['webhook', 'set', '--help']);
  expect([r.code, r.stderr]).toEqual([0, '']);
  expect(r.stdout).toMatch(/^usage: npm run --silent admin -- webhook set \[options\] \[--json\]\n/);
  for (const option of ['--site S', '--url U', '--events e1,e2', '--json', '--help']) expect(r.stdout).toContain(option);
  expect(r.stdout).toContain("settings read from the CLI's own environment (not the server's):");
  for (const setting of ['WEBHOOK_ALLOW_PRIVATE_NETWORKS', 'DATABASE_URL', 'DATA_DIR', 'MASTER_KEY']) expect(r.stdout).toContain(setting);
  expect(r.stdout).not.toContain('key create'); // not the global usage
});

test('the global help lists every command; an unknown command or option is named, with the closest one', async () => {
  const help = await cli.admin(['--help']);
  expect(help.code).toBe(0);
  expect(help.stdout).toMatch(/^ {2}webhook set +Sets the site's event address/m);
  const option = await cli.admin(['site', 'list', '--jsn']);
  expect([option.code, option.stdout, option.stderr]).toEqual([1, '', 'error: unknown option --jsn (did you mean --json?)\n']);
  const command = await cli.admin(['webhok', 'set']);
  expect(command.code).toBe(1);
  expect(command.stderr).toMatch(/^error: unknown command "webhok set" \(did you mean "webhook set"\?\)/);
});

test('a private event address refused by the CLI says the setting is read from its own environment', async () => {
  const site = await cli.adminJson(['site', 'create', '--name', 'Acme']);
  const r = await cli.admin(['webhook', 'set', '--site', site.id, '--url', 'https://127.0.0.1:9/hook']);
  expect(r.code).toBe(1);
  expect(r.stderr).toMatch(
    /WEBHOOK_ALLOW_PRIVATE_NETWORKS=true allows them.*This CLI reads WEBHOOK_ALLOW_PRIVATE_NETWORKS from its own environment, not the server's/,
  );
});
