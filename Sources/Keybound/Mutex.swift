import Foundation

/// A lock around a value. (`Synchronization.Mutex` needs iOS 18 / macOS 15; Keybound supports
/// iOS 16 / macOS 13.)
package final class Mutex<Value>: @unchecked Sendable {
    // Safe: `value` is only touched while `lock` is held.
    private let lock = NSLock()
    private var value: Value

    package init(_ value: Value) { self.value = value }

    package func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}
