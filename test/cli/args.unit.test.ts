/** The CLI's parser and help come from one definition of each command's options. */
import { closest, commandHelp, CliError, GLOBAL_OPTIONS, parseArgs, CLI_ENV } from '../../server/cli/args';
import { commands } from '../../server/cli/commands';

const names = Object.keys(commands);

test.each(names)('%s: every option the parser accepts is in its help, and only those are accepted', (name) => {
  const command = commands[name];
  const help = commandHelp(name, command);
  expect(help).toContain(`admin -- ${name}`);
  for (const option of [...command.options, ...GLOBAL_OPTIONS]) {
    expect(help).toContain(`--${option.name}${option.value ? ' ' + option.value : ''}`);
    const argv = option.value ? [`--${option.name}`, 'x'] : [`--${option.name}`];
    expect(parseArgs(argv, command.options).flags[option.name]).toBe(option.value ? 'x' : true);
  }
  for (const setting of Object.keys(CLI_ENV)) expect(help).toContain(setting);
  expect(() => parseArgs(['--no-such-option'], command.options)).toThrow(new CliError('unknown option --no-such-option'));
});

test('an unknown option is named as such, with the closest known one', () => {
  expect(() => parseArgs(['--jsn'], [])).toThrow(new CliError('unknown option --jsn (did you mean --json?)'));
  const set = commands['webhook set'].options;
  expect(() => parseArgs(['--site', 'ws_1', '--ulr', 'https://x'], set)).toThrow(new CliError('unknown option --ulr (did you mean --url?)'));
  // An option is never taken for the value of the one before it.
  expect(() => parseArgs(['--site', '--json'], set)).toThrow(new CliError('--site needs a value (--site S)'));
  expect(() => parseArgs(['--json=yes'], set)).toThrow(new CliError('--json takes no value'));
  expect(() => parseArgs(['--site', 'a', '--site', 'b'], set)).toThrow(new CliError('--site is given twice'));
});

test('a repeatable option collects every value', () => {
  const parsed = parseArgs(['--file', 'a', '--file=b'], commands['visitor say'].options);
  expect(parsed.lists.file).toEqual(['a', 'b']);
});

test('closest: within two edits, never a guess for a short unrelated word', () => {
  expect(closest('jsno', ['json', 'help'])).toBe('json');
  expect(closest('evnets', ['events', 'event'])).toBe('events');
  expect(closest('x', ['json', 'help'])).toBeUndefined();
  expect(closest('webhok set', names)).toBe('webhook set');
});
