// Sign-in failures of the oidc channel, apart from the relying party so routes can test for them without
// loading openid-client.

export class OidcUnavailable extends Error {}

/** A sign-in the provider or svc refused; `status` is the HTTP answer (400 for the browser's flow, 502 for the provider). */
export class OidcFailure extends Error {
  constructor(
    readonly status: 400 | 502,
    message: string,
  ) {
    super(message);
  }
}
