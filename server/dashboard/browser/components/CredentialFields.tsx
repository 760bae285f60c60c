import { TextInput } from './Field';

/** The server's shortest password (PASSWORD_MIN_LENGTH in server/accounts/passwords.ts): told before the call. */
export const NEW_PASSWORD_MIN_LENGTH = 12;

export interface CredentialFieldsProps {
  email: string;
  onEmail: (email: string) => void;
  password: string;
  onPassword: (password: string) => void;
  /** `current`: the account's password, to sign in; `new`: one being chosen, at least 12 characters. */
  kind: 'current' | 'new';
  /** The email field's label where it says more than "Email". */
  emailLabel?: string;
  /** More under the password field (after "At least 12 characters." for a new one). */
  passwordHint?: string;
  /** The field focused when the form opens: the password where the email is known already. */
  autofocus?: 'email' | 'password';
}

/**
 * The email and password of every form that signs a person in or makes their account (sign-in and
 * its dialog, accepting an invitation, setup): `username` and `current-password`/`new-password`
 * so password managers fill or offer to save them, each labelled and with its hint tied to it.
 */
export function CredentialFields({ email, onEmail, password, onPassword, kind, emailLabel = 'Email', passwordHint, autofocus }: CredentialFieldsProps) {
  const isNew = kind === 'new';
  return (
    <>
      <TextInput label={emailLabel} type="email" value={email} onValue={onEmail} required autocomplete="username" autofocus={autofocus === 'email'} />
      <TextInput
        label="Password"
        type="password"
        value={password}
        onValue={onPassword}
        required
        minLength={isNew ? NEW_PASSWORD_MIN_LENGTH : undefined}
        autocomplete={isNew ? 'new-password' : 'current-password'}
        autofocus={autofocus === 'password'}
        hint={isNew ? [`At least ${NEW_PASSWORD_MIN_LENGTH} characters.`, passwordHint].filter(Boolean).join(' ') : passwordHint}
      />
    </>
  );
}
