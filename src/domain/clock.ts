// What time it is, for everything svc stores with a time or an expiry. svc runs on the system clock; the server
// takes another only from code that starts it in-process (tests move time instead of waiting or editing rows).
// Nothing in svc.ini or the environment can set it.
export type Clock = () => number;

export const systemClock: Clock = () => Date.now();
