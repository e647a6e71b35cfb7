import Foundation

/// The server's step-up window, as `GET /v1/me` states it (`step_up_expires_at`): binding a
/// device and adding a passkey need a recent password or passkey login. The flows check it
/// before creating a key or prompting, so a refusal never leaves a key no server knows or shows
/// a prompt for nothing.
enum StepUp {
    /// Throws `server` with `step_up_required` (recovery `usePassword`) unless `me`'s login is
    /// still within the window at `now`.
    static func require(_ me: MeResponse, now: Date, for action: String) throws {
        guard let expiresAt = me.stepUpExpiresAt, now < expiresAt else {
            throw KeyboundError(
                .server, message: "\(action) needs a recent login; log in again",
                serverCode: .stepUpRequired, recovery: .usePassword)
        }
    }
}
