import { useState } from 'preact/hooks';
import { Button } from '../components/Button';
import { Dialog } from '../components/Dialog';
import { TextInput } from '../components/Field';
import { loadCanned, saveCanned, type CannedReply } from './canned';

/** Adds and removes the member's canned replies (kept in this browser only: canned.ts). */
export function CannedEditor({ accountId, onClose }: { accountId: string; onClose: () => void }) {
  const [replies, setReplies] = useState<CannedReply[]>(() => loadCanned(accountId));
  const [title, setTitle] = useState('');
  const [body, setBody] = useState('');
  const [problem, setProblem] = useState('');
  const keep = (next: CannedReply[]) => {
    setReplies(next);
    saveCanned(accountId, next);
  };
  return (
    <Dialog title="Canned replies" onClose={onClose} class="canned-dialog">
      <p class="hint">Type / at the start of a reply to insert one. They are kept in this browser only, for your account.</p>
      {replies.length === 0 ? (
        <p class="muted">None yet.</p>
      ) : (
        <ul class="canned-edit">
          {replies.map((r, i) => (
            <li key={`${i}-${r.title}`}>
              <span>
                <strong>{r.title}</strong> <span class="muted">{r.body}</span>
              </span>
              <Button variant="link" aria-label={`Remove ${r.title}`} onClick={() => keep(replies.filter((_, j) => j !== i))}>
                Remove
              </Button>
            </li>
          ))}
        </ul>
      )}
      <form
        class="stack"
        aria-label="New canned reply"
        onSubmit={(e) => {
          e.preventDefault();
          if (!title.trim() || !body.trim()) return setProblem('A canned reply needs a title and a text.');
          if (replies.some((r) => r.title === title.trim())) return setProblem('There is one with this title already.');
          keep([...replies, { title: title.trim(), body }]);
          setTitle('');
          setBody('');
          setProblem('');
        }}
      >
        <TextInput label="Title" autofocus value={title} onValue={setTitle} maxLength={60} error={problem || null} />
        <div class="field">
          <label for="canned-new-body">Text</label>
          <textarea id="canned-new-body" rows={3} value={body} maxLength={10000} onInput={(e) => setBody(e.currentTarget.value)} />
        </div>
        <div class="actions">
          <Button onClick={onClose}>Done</Button>
          <Button variant="primary" submit>
            Add
          </Button>
        </div>
      </form>
    </Dialog>
  );
}
