import Foundation
import KeyboundWire

extension Harness {
    /// The strict JSON reader every body goes through; what parses is written back compactly and
    /// parses again to the same value.
    static let json = Harness(
        name: "json", covers: "KeyboundWire JSON.parse (strict RFC 8259) and JSON.serialize round trips"
    ) { data in
        guard let value = try? JSON.parse(data) else { return }
        let written = JSON.serialize(value)
        expect((try? JSON.parse(written)) == value, "JSON.serialize output does not parse to the same value")
    }
}
