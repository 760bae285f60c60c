import { createHash } from 'node:crypto';

/**
 * A visitor's display name (docs/dashboard.md, "Display names"): the name the site's server vouched
 * for (a verified identity), else a name the page passed (shown as unverified), else a friendly name
 * derived from the visitor id, so that an anonymous visitor reads as "Brave Otter" on every row and
 * in every tab, and the same visitor is the same name tomorrow. Pure: no clock, no database.
 */

const ADJECTIVES = [
  'Amber',
  'Azure',
  'Bold',
  'Brave',
  'Bright',
  'Brisk',
  'Calm',
  'Candid',
  'Cheerful',
  'Clever',
  'Cosmic',
  'Crimson',
  'Curious',
  'Daring',
  'Dapper',
  'Eager',
  'Earnest',
  'Fearless',
  'Fleet',
  'Gentle',
  'Gilded',
  'Glad',
  'Golden',
  'Graceful',
  'Happy',
  'Hardy',
  'Honest',
  'Humble',
  'Jolly',
  'Keen',
  'Kind',
  'Lively',
  'Lucky',
  'Lunar',
  'Mellow',
  'Merry',
  'Mighty',
  'Misty',
  'Modest',
  'Nimble',
  'Noble',
  'Patient',
  'Plucky',
  'Polite',
  'Proud',
  'Quick',
  'Quiet',
  'Radiant',
  'Rapid',
  'Rustic',
  'Sage',
  'Serene',
  'Silver',
  'Sincere',
  'Snowy',
  'Solar',
  'Spry',
  'Steady',
  'Sunny',
  'Swift',
  'Tidy',
  'Tranquil',
  'Valiant',
  'Vivid',
  'Warm',
  'Wise',
  'Witty',
  'Zesty',
];
const ANIMALS = [
  'Albatross',
  'Alpaca',
  'Badger',
  'Beaver',
  'Bison',
  'Bobcat',
  'Capybara',
  'Caribou',
  'Cheetah',
  'Condor',
  'Crane',
  'Dolphin',
  'Falcon',
  'Ferret',
  'Finch',
  'Fox',
  'Gazelle',
  'Gecko',
  'Heron',
  'Hedgehog',
  'Ibis',
  'Jackal',
  'Jaguar',
  'Kestrel',
  'Koala',
  'Lemur',
  'Leopard',
  'Lynx',
  'Magpie',
  'Manatee',
  'Marten',
  'Meerkat',
  'Mongoose',
  'Moose',
  'Narwhal',
  'Newt',
  'Ocelot',
  'Orca',
  'Osprey',
  'Otter',
  'Owl',
  'Panda',
  'Panther',
  'Pelican',
  'Penguin',
  'Puffin',
  'Quail',
  'Raccoon',
  'Raven',
  'Robin',
  'Salmon',
  'Seal',
  'Sparrow',
  'Stork',
  'Swan',
  'Tapir',
  'Tiger',
  'Toucan',
  'Turtle',
  'Walrus',
  'Weasel',
  'Whale',
  'Wolf',
  'Wombat',
  'Wren',
  'Yak',
  'Zebra',
  'Ermine',
];

/** The stable friendly name of a visitor id: adjective and animal chosen by a hash of the id. */
export function friendlyName(visitorId: string): string {
  const digest = createHash('sha256').update(visitorId).digest();
  return `${ADJECTIVES[digest.readUInt32BE(0) % ADJECTIVES.length]} ${ANIMALS[digest.readUInt32BE(4) % ANIMALS.length]}`;
}

export type DisplayNameSource = 'verified' | 'unverified' | 'generated';

/** What the site knows of a visitor's name (server/visitors/store.ts), absent when nothing. */
export interface KnownName {
  name: string | null;
  nameVerified: boolean;
}

/** The name to show for a visitor, and where it came from. */
export function visitorDisplayName(visitorId: string, known: KnownName | undefined): { name: string; source: DisplayNameSource } {
  const name = known?.name?.trim();
  if (name) return { name, source: known!.nameVerified ? 'verified' : 'unverified' };
  return { name: friendlyName(visitorId), source: 'generated' };
}

/** A member's name: the display name they chose, else the local part of their email. */
export function memberDisplayName(account: { displayName: string | null; email: string }): string {
  const chosen = account.displayName?.trim();
  if (chosen) return chosen;
  const at = account.email.indexOf('@');
  return at > 0 ? account.email.slice(0, at) : account.email;
}
