import Foundation
import KeyboundWire

extension Harness {
    /// The payload a device parses (and shows) before it signs: only the canonical encoding may
    /// parse, so what parses is exactly what ``SigningPayload/bytes`` writes.
    static let signingPayload = Harness(
        name: "signing-payload", covers: "KeyboundWire SigningPayload(parsing:): canonical form only"
    ) { data in
        guard let payload = try? SigningPayload(parsing: data) else { return }
        expect(payload.bytes == data, "a signing payload parsed from non-canonical bytes")
        expect((try? SigningPayload(parsing: payload.bytes)) == payload, "a payload does not parse its bytes")
    }
}
