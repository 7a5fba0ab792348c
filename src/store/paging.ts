// Lists that grow with what people do (tokens, connected apps, the readers of an item) are read a page at a time,
// so no answer of svc grows with them. A page is asked for by number, from 1; one row more than the page is read
// to tell whether another page follows.

export interface PageRequest {
  /** 1 for the first page */
  readonly page: number;
  readonly size: number;
}

export interface Page<T> {
  readonly rows: T[];
  /** whether a page follows this one */
  readonly more: boolean;
}

/** LIMIT and OFFSET for a page request: one row more than the page, to see whether another follows. */
export function window(request: PageRequest): { limit: number; offset: number } {
  return { limit: request.size + 1, offset: (request.page - 1) * request.size };
}

/** The page out of the rows read with window(). */
export function pageOf<T>(rows: T[], request: PageRequest): Page<T> {
  return { rows: rows.slice(0, request.size), more: rows.length > request.size };
}
