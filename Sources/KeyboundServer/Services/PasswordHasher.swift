import CSodium
import Foundation

/// Argon2id cost parameters.
public struct Argon2Parameters: Sendable, Hashable {
    /// Memory in KiB (`m`).
    public var memoryKiB: Int
    /// Passes (`t`).
    public var iterations: Int

    /// - Parameters:
    ///   - memoryKiB: memory in KiB (`m`); libsodium accepts 8 and more.
    ///   - iterations: passes (`t`); libsodium accepts 1 and more.
    public init(memoryKiB: Int, iterations: Int) {
        self.memoryKiB = memoryKiB
        self.iterations = iterations
    }

    /// OWASP's minimum for Argon2id: m=19 MiB, t=2, p=1. The default, and the floor for production.
    public static let owaspMinimum = Argon2Parameters(memoryKiB: 19 * 1024, iterations: 2)

    /// Cheap parameters for tests only: never use them for real passwords.
    public static let insecureTesting = Argon2Parameters(memoryKiB: 8, iterations: 1)

    /// Whether these parameters are at least ``owaspMinimum``.
    public var meetsOWASPMinimum: Bool {
        memoryKiB >= Self.owaspMinimum.memoryKiB && iterations >= Self.owaspMinimum.iterations
    }
}

/// Errors of the password hasher (none is the client's fault).
package struct PasswordHasherError: Error, CustomStringConvertible {
    /// What failed.
    package let description: String
}

/// Argon2id password hashing through libsodium (one lane, p=1), with concurrent hashes bounded
/// by a semaphore so memory stays bounded under load. Unknown users are verified against a dummy
/// hash with the same parameters, so they cost the same time.
package final class PasswordHasher: Sendable {
    /// The cost of new hashes.
    package let parameters: Argon2Parameters
    private let slots: DispatchSemaphore
    private let dummyHash: String

    /// - Parameters:
    ///   - parameters: the cost of new hashes.
    ///   - concurrency: how many hashes may run at once (default: the core count).
    package init(
        parameters: Argon2Parameters, concurrency: Int = ProcessInfo.processInfo.activeProcessorCount
    ) throws {
        guard sodium_init() >= 0 else { throw PasswordHasherError(description: "sodium_init failed") }
        self.parameters = parameters
        slots = DispatchSemaphore(value: max(1, concurrency))
        dummyHash = try Self.hash(SecureRandomBytes.make(32), parameters: parameters)
    }

    private static func hash(_ password: String, parameters: Argon2Parameters) throws -> String {
        var output = [CChar](repeating: 0, count: kb_pwhash_strbytes())
        let status = withPasswordBytes(password) { bytes, count in
            crypto_pwhash_str_alg(
                &output, bytes, count, UInt64(parameters.iterations), parameters.memoryKiB * 1024,
                crypto_pwhash_alg_argon2id13())
        }
        guard status == 0 else {
            throw PasswordHasherError(description: "argon2id hashing failed (out of memory?)")
        }
        return String(decoding: output.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// Calls `body` with the password's UTF-8 bytes (embedded NULs kept) and their count.
    private static func withPasswordBytes(_ password: String, _ body: (UnsafePointer<CChar>, UInt64) -> Int32)
        -> Int32
    {
        let bytes = Array(password.utf8).map { CChar(bitPattern: $0) } + [0]
        return bytes.withUnsafeBufferPointer { buffer in
            guard let base = buffer.baseAddress else { return -1 }
            return body(base, UInt64(buffer.count - 1))
        }
    }

    /// Hashes a password into an encoded `$argon2id$v=19$m=…,t=…,p=1$…` string.
    /// - Throws: ``PasswordHasherError`` when libsodium fails (out of memory).
    package func hash(_ password: String) throws -> String {
        slots.wait()
        defer { slots.signal() }
        return try Self.hash(password, parameters: parameters)
    }

    /// Verifies `password` against an encoded hash; with `nil` (unknown user) or an empty hash (an
    /// account without a password) it verifies against the dummy hash and returns false, at the
    /// same cost.
    package func verify(_ password: String, against encoded: String?) -> Bool {
        slots.wait()
        defer { slots.signal() }
        let stored = encoded.flatMap { $0.isEmpty ? nil : $0 }
        let target = stored ?? dummyHash
        let status = Self.withPasswordBytes(password) { bytes, count in
            crypto_pwhash_str_verify(target, bytes, count)
        }
        return status == 0 && stored != nil
    }
}
