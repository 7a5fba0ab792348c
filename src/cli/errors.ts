/** Wrong command-line arguments; the CLI prints the message with the command's usage. */
export class UsageError extends Error {}
