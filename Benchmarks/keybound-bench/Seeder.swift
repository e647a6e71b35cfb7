import CSQLite
import Foundation
import KeyboundCrypto
import KeyboundWire

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A value to bind.
enum SeedValue {
    case text(String)
    case integer(Int64)
    case null
}

/// Where seeded rows go, in transactions of many inserts: SQLite through ``SQLiteSeeder``,
/// PostgreSQL through the server's own storage (``PostgresSeedTarget``).
protocol SeedTarget {
    /// Runs `body` in one transaction; `insert` runs one statement with its values.
    func transaction(_ body: (_ insert: (String, [SeedValue]) throws -> Void) throws -> Void) throws
}

/// Bulk inserts straight into the server's SQLite file, for populations that the HTTP API
/// cannot create inside the time bound (each API login is a durable transaction).
///
/// The schema is the server's own: the bench creates it by opening a `Server` on the file first
/// (its migrations run), closes it, and only then inserts rows here, with the column formats the
/// server writes (base64url ids and keys, SHA-256 hex token hashes, milliseconds). While seeding,
/// SQLite runs without a journal and without syncing; the file is back in WAL mode when the
/// seeder closes, as the server expects.
final class SQLiteSeeder: SeedTarget {
    private let handle: OpaquePointer
    private var statements: [String: OpaquePointer] = [:]

    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    /// - Parameter cacheMiB: SQLite's page cache while seeding. Its memory stays in the
    ///   process's heap after the seeder closes, so keep it small before measuring memory.
    init(path: String, cacheMiB: Int) throws {
        var opened: OpaquePointer?
        let status = sqlite3_open_v2(path, &opened, SQLITE_OPEN_READWRITE, nil)
        guard status == SQLITE_OK, let opened else {
            sqlite3_close_v2(opened)
            throw Failure(description: "cannot open \(path) (\(status))")
        }
        handle = opened
        // No rollback journal: a failed seed leaves a throwaway file, and an in-memory journal
        // would leave its heap behind in the process whose memory is measured next.
        try execute("PRAGMA journal_mode = OFF")
        try execute("PRAGMA synchronous = OFF")
        try execute("PRAGMA cache_size = -\(cacheMiB * 1024)")
    }

    deinit {
        for statement in statements.values { sqlite3_finalize(statement) }
        // Back to the server's journal mode, so the file is exactly what the server expects.
        _ = sqlite3_exec(handle, "PRAGMA journal_mode = WAL", nil, nil, nil)
        sqlite3_close_v2(handle)
        // Write the seeded pages out now: otherwise the kernel flushes them during the next
        // measurement, and the server's commits wait behind hundreds of MiB of writeback.
        sync()
    }

    private func check(_ status: Int32, _ what: String) throws {
        guard status == SQLITE_OK || status == SQLITE_DONE || status == SQLITE_ROW else {
            throw Failure(description: "\(what): \(String(cString: sqlite3_errmsg(handle)))")
        }
    }

    func execute(_ sql: String) throws {
        try check(sqlite3_exec(handle, sql, nil, nil, nil), sql)
    }

    /// Runs one cached prepared statement with `values`.
    func insert(_ sql: String, _ values: [SeedValue]) throws {
        let statement: OpaquePointer
        if let cached = statements[sql] {
            statement = cached
        } else {
            var prepared: OpaquePointer?
            try check(sqlite3_prepare_v2(handle, sql, -1, &prepared, nil), sql)
            guard let prepared else { throw Failure(description: "empty statement") }
            statements[sql] = prepared
            statement = prepared
        }
        defer { sqlite3_reset(statement) }
        for (offset, value) in values.enumerated() {
            let index = Int32(offset + 1)
            switch value {
            case .text(let text):
                try check(sqlite3_bind_text(statement, index, text, -1, kb_sqlite_transient()), sql)
            case .integer(let number): try check(sqlite3_bind_int64(statement, index, number), sql)
            case .null: try check(sqlite3_bind_null(statement, index), sql)
            }
        }
        try check(sqlite3_step(statement), sql)
    }

    /// Runs `body` in one transaction.
    func transaction(_ body: (_ insert: (String, [SeedValue]) throws -> Void) throws -> Void) throws {
        try execute("BEGIN")
        do {
            try body(insert)
            try execute("COMMIT")
        } catch {
            _ = sqlite3_exec(handle, "ROLLBACK", nil, nil, nil)
            throw error
        }
    }
}

/// Base64url without padding, byte for byte what `Base64URL.encode` gives, but without its
/// three `replacingOccurrences` passes, which cost more than the insert on Linux.
func base64url(_ bytes: [UInt8]) -> String {
    let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
    var out: [UInt8] = []
    out.reserveCapacity((bytes.count * 4 + 2) / 3)
    var index = 0
    while index < bytes.count {
        let remaining = bytes.count - index
        let first = UInt32(bytes[index])
        let second = remaining > 1 ? UInt32(bytes[index + 1]) : 0
        let third = remaining > 2 ? UInt32(bytes[index + 2]) : 0
        let group = first << 16 | second << 8 | third
        out.append(alphabet[Int(group >> 18 & 63)])
        out.append(alphabet[Int(group >> 12 & 63)])
        if remaining > 1 { out.append(alphabet[Int(group >> 6 & 63)]) }
        if remaining > 2 { out.append(alphabet[Int(group & 63)]) }
        index += 3
    }
    return String(decoding: out, as: UTF8.self)
}

/// `count` random bytes.
func randomBytes(_ count: Int, using generator: inout some RandomNumberGenerator) -> [UInt8] {
    var bytes: [UInt8] = []
    bytes.reserveCapacity(count)
    while bytes.count < count {
        var word: UInt64 = generator.next()
        for _ in 0..<min(8, count - bytes.count) {
            bytes.append(UInt8(truncatingIfNeeded: word))
            word >>= 8
        }
    }
    return bytes
}

/// SplitMix64, seeded from the system generator: ids and tokens of a throwaway benchmark
/// database need to be unique and evenly spread like the server's, not secret, and the system
/// generator would make seeding a million rows a million system calls.
struct FastRandom: RandomNumberGenerator {
    private var state: UInt64

    init() {
        var system = SystemRandomNumberGenerator()
        state = system.next()
    }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var mixed = state
        mixed = (mixed ^ (mixed >> 30)) &* 0xBF58_476D_1CE4_E5B9
        mixed = (mixed ^ (mixed >> 27)) &* 0x94D0_49BB_1331_11EB
        return mixed ^ (mixed >> 31)
    }
}

/// `count` distinct-with-overwhelming-probability random ids of the server's shape (prefix, `_`,
/// 22 characters of the base64url alphabet), in ascending byte order. They are made from sorted
/// random numbers written in base 64 with the alphabet in ASCII order, which keeps the order:
/// sorting a million strings would cost seconds of the time bound.
func sortedIdentifiers(_ prefix: String, count: Int, using generator: inout some RandomNumberGenerator)
    -> [String]
{
    let ordered = Array("-0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz".utf8)
    var numbers = (0..<count).map { _ in
        (high: generator.next() >> 4 as UInt64, low: generator.next() as UInt64)
    }
    numbers.sort { $0.high != $1.high ? $0.high < $1.high : $0.low < $1.low }
    let head = Array((prefix + "_").utf8)
    return numbers.map { number in
        var bytes = head
        for shift in stride(from: 54, through: 0, by: -6) {
            bytes.append(ordered[Int(number.high >> UInt64(shift) & 63)])
        }
        for shift in stride(from: 58, through: 4, by: -6) {
            bytes.append(ordered[Int(number.low >> UInt64(shift) & 63)])
        }
        bytes.append(ordered[Int(number.low & 15) << 2])
        bytes.append(UInt8(ascii: "A"))
        return String(decoding: bytes, as: UTF8.self)
    }
}

/// A random id in the server's format: a prefix, `_`, base64url of 16 random bytes.
func randomIdentifier(_ prefix: String, using generator: inout some RandomNumberGenerator) -> String {
    prefix + "_" + base64url(randomBytes(16, using: &generator))
}

/// Milliseconds since 1970, as the server stores time.
func nowMilliseconds() -> Int64 { Int64(Date().timeIntervalSince1970 * 1000) }

enum Seed {
    static let insertUser = "INSERT INTO users (id, username, password_hash, created_at) VALUES (?, ?, ?, ?)"
    static let insertDevice = """
        INSERT INTO devices (id, user_id, client_id, name, key_protection, public_key, created_at,
            last_used_at, failed_signatures, suspended_at, revoked_at)
        VALUES (?, ?, ?, ?, ?, ?, ?, NULL, 0, NULL, NULL)
        """
    static let insertSession = """
        INSERT INTO sessions (id, user_id, client_id, device_id, auth_method, auth_time, created_at,
            revoked_at, revoke_reason)
        VALUES (?, ?, ?, NULL, 'password', ?, ?, NULL, NULL)
        """
    static let insertToken =
        "INSERT INTO tokens (hash, session_id, kind, expires_at, used_at) VALUES (?, ?, ?, ?, NULL)"

    /// Inserts up to `count` users, each with one bound, active device (all filler devices share
    /// one public key: nothing requires keys to differ, and no filler device ever logs in). Ids
    /// are random and shaped like the server's, and inserted in key order, which only makes the
    /// B-tree inserts cheaper. Works in batches and stops at `deadline`; returns how many were
    /// inserted.
    static func usersWithDevices(
        into target: some SeedTarget, count: Int, passwordHash: String, publicKey: Data, deadline: UInt64
    ) throws -> Int {
        guard count > 0 else { return 0 }
        var generator = FastRandom()
        let userIDs = sortedIdentifiers("usr", count: count, using: &generator)
        let deviceIDs = sortedIdentifiers("dev", count: count, using: &generator)
        let key = Base64URL.encode(publicKey)
        let now = nowMilliseconds()
        let batch = 25_000
        var inserted = 0
        while inserted < count, nanoseconds() < deadline {
            let upper = min(count, inserted + batch)
            try target.transaction { insert in
                for index in inserted..<upper {
                    try insert(
                        insertUser,
                        [
                            .text(userIDs[index]), .text("filler\(1_000_000_000 + index)"),
                            .text(passwordHash),
                            .integer(now),
                        ])
                    try insert(
                        insertDevice,
                        [
                            .text(deviceIDs[index]), .text(userIDs[index]), .text("filler-phone"),
                            .text("phone"), .text(KeyProtection.secureEnclave.rawValue), .text(key),
                            .integer(now),
                        ])
                }
            }
            inserted = upper
        }
        return inserted
    }

    /// Inserts `count` users, each with one live password session and its access and refresh
    /// token (stored as the server stores them: SHA-256 hex of the token), plus the users named
    /// `loginUsers` (no session) with `passwordHash`. Returns a sample of the access tokens, so
    /// the caller can check the server accepts them.
    static func sessions(path: String, count: Int, passwordHash: String, loginUsers: [String]) throws
        -> [String]
    {
        var generator = FastRandom()
        let now = nowMilliseconds()
        let seeder = try SQLiteSeeder(path: path, cacheMiB: 64)
        var sample: [String] = []
        try seeder.transaction { _ in
            for username in loginUsers {
                try seeder.insert(
                    insertUser,
                    [
                        .text(randomIdentifier("usr", using: &generator)), .text(username),
                        .text(passwordHash),
                        .integer(now),
                    ])
            }
        }
        // Ids in key order (cheaper B-tree inserts); token hashes are random, as the server's are.
        let userIDs = sortedIdentifiers("usr", count: count, using: &generator)
        let sessionIDs = sortedIdentifiers("ses", count: count, using: &generator)
        let batch = 25_000
        var inserted = 0
        while inserted < count {
            let upper = min(count, inserted + batch)
            try seeder.transaction { _ in
                for index in inserted..<upper {
                    let userID = userIDs[index]
                    let sessionID = sessionIDs[index]
                    try seeder.insert(
                        insertUser,
                        [
                            .text(userID), .text("holder\(1_000_000_000 + index)"), .text(passwordHash),
                            .integer(now),
                        ])
                    try seeder.insert(
                        insertSession,
                        [.text(sessionID), .text(userID), .text("phone"), .integer(now), .integer(now)])
                    for (kind, lifetime) in [("access", Int64(15 * 60)), ("refresh", Int64(30 * 24 * 3600))] {
                        let token = base64url(randomBytes(32, using: &generator))
                        if kind == "access" && sample.count < 100 && index % max(1, count / 100) == 0 {
                            sample.append(token)
                        }
                        try seeder.insert(
                            insertToken,
                            [
                                .text(tokenHash(token)), .text(sessionID), .text(kind),
                                .integer(now + lifetime * 1000),
                            ])
                    }
                }
            }
            inserted = upper
        }
        return sample
    }

    /// The server's token hash: lowercase hex of SHA-256 of the token's UTF-8.
    static func tokenHash(_ token: String) -> String {
        let hex = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(64)
        for byte in Digest.sha256(Data(token.utf8)) {
            out.append(hex[Int(byte >> 4)])
            out.append(hex[Int(byte & 0x0F)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}
