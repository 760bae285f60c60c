import type { ComponentChildren } from 'preact';
import { useId } from 'preact/hooks';

export interface Column<T> {
  /** The header cell's text. */
  header: string;
  cell: (row: T) => ComponentChildren;
  /** A class on the column's cells (e.g. `num`, `nowrap`). */
  class?: string;
}

export interface TableProps<T> {
  /** Says what the table lists; visible, and its accessible name. */
  caption: string;
  columns: Column<T>[];
  rows: T[];
  rowKey: (row: T) => string;
  /** Shown instead of the table when there are no rows. */
  empty?: ComponentChildren;
}

/**
 * A data table. On a narrow screen it scrolls sideways inside its own region, which is focusable
 * (so a keyboard can scroll it) and named by the caption.
 */
export function Table<T>({ caption, columns, rows, rowKey, empty }: TableProps<T>) {
  const id = useId();
  if (!rows.length && empty) return <>{empty}</>;
  return (
    <div class="table-scroll" role="region" aria-labelledby={id} tabIndex={0}>
      <table class="table">
        <caption id={id}>{caption}</caption>
        <thead>
          <tr>
            {columns.map((c) => (
              <th scope="col" class={c.class} key={c.header}>
                {c.header}
              </th>
            ))}
          </tr>
        </thead>
        <tbody>
          {rows.map((row) => (
            <tr key={rowKey(row)}>
              {columns.map((c) => (
                <td class={c.class} key={c.header}>
                  {c.cell(row)}
                </td>
              ))}
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
