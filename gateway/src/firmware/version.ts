import { z } from 'zod';

/**
 * A firmware version as the xiaozhi firmware reads it: it splits the string on '.' and converts each
 * part with std::stoi, in a build without exceptions, so one part that does not start with a digit
 * (`v2.6.0`, `2.6.0-beta.rc`) aborts the device on the OTA answer, and it reboots into the same answer.
 * The gateway accepts numbers separated by dots only (each small enough for an int), and compares them
 * the way the firmware does.
 */
export const FIRMWARE_VERSION_PATTERN = /^\d{1,9}(\.\d{1,9}){0,15}$/;

const MESSAGE =
  'a version the firmware can read: numbers separated by dots, such as 1.4.0 (a semantic version with a "v" prefix or a suffix such as -beta makes the device abort)';

/** A new schema each time, so each field can declare its own variable. */
export const FirmwareVersion = () => z.string().regex(FIRMWARE_VERSION_PATTERN, MESSAGE);

/** Why `version` would abort a device, or undefined when the firmware can read it. */
export function firmwareVersionProblem(version: string): string | undefined {
  return FIRMWARE_VERSION_PATTERN.test(version) ? undefined : `"${version.slice(0, 64)}" is not ${MESSAGE}`;
}

/**
 * The firmware's own "is this newer?" (Ota::IsNewVersionAvailable): part by part as numbers; when every
 * shared part is equal, the longer version is the newer. Both must be readable (see FIRMWARE_VERSION_PATTERN).
 */
export function isNewerFirmware(current: string, offered: string): boolean {
  const a = current.split('.').map(Number);
  const b = offered.split('.').map(Number);
  for (let i = 0; i < Math.min(a.length, b.length); i++) if (b[i] !== a[i]) return b[i]! > a[i]!;
  return b.length > a.length;
}
