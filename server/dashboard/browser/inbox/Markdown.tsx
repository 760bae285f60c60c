import { useLayoutEffect, useRef } from 'preact/hooks';
import { renderContent } from '../../../window/browser/markdown';

/**
 * A message's text as the chat window shows it: the window's parser (linear time on any input)
 * and its renderer, which builds DOM nodes and never parses HTML; links only http(s) and mailto.
 */
export function Markdown({ content, format, class: cls }: { content: string; format: string; class?: string }) {
  const ref = useRef<HTMLDivElement>(null);
  useLayoutEffect(() => {
    ref.current?.replaceChildren(renderContent(document, content, format));
  }, [content, format]);
  return <div ref={ref} class={`md${cls ? ` ${cls}` : ''}`} />;
}
