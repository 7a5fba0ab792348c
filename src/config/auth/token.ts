// auth.token: personal access tokens as bearer credentials.
import type { Section, Spec } from './section.ts';

export const TOKEN_KEYS: Spec = { enabled: 'bool' };

export const readToken = (section: Section): boolean => section.bool('enabled');
