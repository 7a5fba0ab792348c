// What every administration page shares: who is looking, the notice line, and paging.
export interface Frame {
  nonce: string;
  me: { uid: string; canLogout: boolean };
  notice?: string | undefined;
  error?: string | undefined;
}

export function Notices(p: { notice?: string | undefined; error?: string | undefined }) {
  return (
    <>
      {p.notice && (
        <p class="notice ok" role="status">
          {p.notice}
        </p>
      )}
      {p.error && (
        <p class="notice error" role="alert">
          {p.error}
        </p>
      )}
    </>
  );
}

/** Previous and next links of a paged list. */
export function Pager(p: { page: number; pages: number; link: (page: number) => string }) {
  if (p.pages <= 1) return null;
  return (
    <nav class="row" aria-label="pages">
      {p.page > 1 && <a href={p.link(p.page - 1)}>← Previous</a>}
      {p.page < p.pages && <a href={p.link(p.page + 1)}>Next →</a>}
    </nav>
  );
}
