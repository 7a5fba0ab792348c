// auth.local: sign-in with a user name and password kept by svc.
import type { Section, Spec } from './section.ts';

export const LOCAL_KEYS: Spec = { enabled: 'bool' };

export const readLocal = (section: Section): boolean => section.bool('enabled');
