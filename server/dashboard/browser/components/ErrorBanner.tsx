import { ApiFailure, describeFailure } from '../api';

/**
 * A failure, announced (role=alert) in words a person can act on: the envelope's message, with a
 * clearer sentence for `forbidden` and `cross_site_request` (api.ts, describeFailure). Renders
 * nothing for no error.
 */
export function ErrorBanner({ error }: { error: unknown }) {
  if (!error) return null;
  const requestId = error instanceof ApiFailure ? error.requestId : null;
  return (
    <div class="banner banner-error" role="alert">
      <p>{describeFailure(error)}</p>
      {requestId && <p class="banner-detail">Request id: {requestId}</p>}
    </div>
  );
}
