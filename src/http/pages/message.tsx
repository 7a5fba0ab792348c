import { Layout } from './layout.tsx';

/** A page that explains why something did not work and where to go next. */
export function MessagePage(p: { nonce: string; title: string; message: string; link?: { href: string; text: string } }) {
  return (
    <Layout title={p.title} nonce={p.nonce}>
      <h1>{p.title}</h1>
      <p class="notice error" role="alert">
        {p.message}
      </p>
      {p.link && (
        <p>
          <a href={p.link.href}>{p.link.text}</a>
        </p>
      )}
    </Layout>
  );
}
