// Paged lists over HTTP: the page a request asks for, and where the next one is. JSON lists answer the first page
// for a plain GET and name the next in a Link header (RFC 8288, as GitHub's API does); pages link to their
// neighbours. A page number is a query parameter, so one page can hold two lists (`tokens_page`, `apps_page`).
import type { PageRequest } from '../store/paging.ts';
import type { Context } from 'hono';

/** Rows in one page of a list that grows with what people do: small enough that a page stays a few hundred KiB. */
export const LIST_PAGE_SIZE = 50;
const PAGE_MAX = 100_000;

/** The page asked for with `?<param>=N` (from 1); anything else is the first. */
export function pageRequest(c: Context, param = 'page', size = LIST_PAGE_SIZE): PageRequest {
  const asked = Number(c.req.query(param));
  return { page: Number.isSafeInteger(asked) && asked >= 1 && asked <= PAGE_MAX ? asked : 1, size };
}

/** This request's path and query, with `param` set to `page`: a link to another page of the same list. */
export function pageHref(c: Context, param: string, page: number): string {
  const url = new URL(c.req.url);
  url.searchParams.set(param, String(page));
  return `${url.pathname}?${url.searchParams}`;
}

/** The Link header naming the next page, under base_url, when there is one. */
export function nextPageHeader(c: Context, baseUrl: string, param: string, page: number, more: boolean): Record<string, string> {
  return more ? { Link: `<${baseUrl}${pageHref(c, param, page + 1)}>; rel="next"` } : {};
}
