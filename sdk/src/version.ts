/** The SDK's version; a test keeps it equal to `version` in sdk/package.json. */
export const VERSION = '0.2.0';
