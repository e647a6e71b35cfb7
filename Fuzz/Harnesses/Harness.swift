import Foundation

/// One fuzz harness: feeds one input to a parser and checks what the parser promises.
///
/// Each harness is a static member in a file of its own, listed once in ``all``. A harness must
/// not crash on any input; when a promise does not hold it calls ``expect(_:_:)``, which stops the
/// run so that libFuzzer keeps the input.
struct Harness: Sendable {
    /// The name `KEYBOUND_FUZZ_HARNESS` and `Fuzz/Corpus/<name>/` use.
    let name: String
    /// What it exercises, one line (printed by `keybound-fuzz --list`).
    let covers: String
    /// Runs one input.
    let run: @Sendable (Data) -> Void

    /// Every harness, in the order `make fuzz` runs them.
    static let all: [Harness] = [
        .base64url, .json, .wireMessages, .signingPayload, .p256PublicKey, .p256Signature, .bearer,
        .serverRequest, .emulatorState, .cbor, .coseKey, .authenticatorData, .clientData,
        .attestationObject, .x509Chain, .appAttestAttestation, .appAttestAssertion,
        .webAuthnRegistration, .webAuthnAuthentication,
    ]

    /// The harness `KEYBOUND_FUZZ_HARNESS` names, or nil.
    static let selected: Harness? = ProcessInfo.processInfo.environment["KEYBOUND_FUZZ_HARNESS"].flatMap {
        name in all.first { $0.name == name }
    }
}

/// Stops the run when a promise of the code under test does not hold, so that libFuzzer saves
/// the input (a crash, for `make fuzz`).
func expect(_ condition: @autoclosure () -> Bool, _ message: @autoclosure () -> String) {
    if !condition() { fatalError("fuzz property violated: \(message())") }
}

/// Takes a fuzz input apart: fixed-size fields first, the rest last. Short inputs give zeros, so
/// every input is usable.
struct FuzzInput {
    private let bytes: [UInt8]
    private var offset = 0

    init(_ data: Data) { bytes = [UInt8](data) }

    /// The next `count` bytes, padded with zeros past the end.
    mutating func take(_ count: Int) -> Data {
        let end = min(offset + count, bytes.count)
        var taken = Data(bytes[min(offset, end)..<end])
        taken.append(Data(count: count - taken.count))
        offset += count
        return taken
    }

    /// The next byte.
    mutating func byte() -> UInt8 { take(1)[0] }

    /// The next 8 bytes as a big-endian integer.
    mutating func uint64() -> UInt64 { take(8).reduce(0) { $0 << 8 | UInt64($1) } }

    /// Everything not taken yet.
    mutating func rest() -> Data {
        defer { offset = bytes.count }
        return offset < bytes.count ? Data(bytes[offset...]) : Data()
    }
}

/// A time from 8 input bytes: seconds since 1970, so seeds can pin the times their certificates
/// are valid at.
func fuzzDate(_ input: inout FuzzInput) -> Date {
    Date(timeIntervalSince1970: TimeInterval(input.uint64() % 40_000_000_000))
}
