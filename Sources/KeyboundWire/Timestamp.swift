import Foundation

/// RFC 3339 timestamps in the one form the wire uses: UTC, whole seconds,
/// `YYYY-MM-DDTHH:MM:SSZ`. Formatting and parsing are locale-free and exact.
package enum Timestamp {
    /// Formats `date` (fractions of a second are dropped, toward the past).
    package static func format(_ date: Date) -> String {
        format(unixSeconds: Int64(date.timeIntervalSince1970.rounded(.down)))
    }

    /// Formats seconds since 1970-01-01T00:00:00Z.
    package static func format(unixSeconds: Int64) -> String {
        let days = unixSeconds >= 0 ? unixSeconds / 86_400 : (unixSeconds - 86_399) / 86_400
        let secondsOfDay = unixSeconds - days * 86_400
        let (year, month, day) = civil(fromDays: days)
        if (0...9999).contains(year) {
            // Byte by byte, into the string's own storage: every log line and every payload
            // carries a timestamp.
            return String(unsafeUninitializedCapacity: 20) { bytes in
                func put(_ value: Int64, at end: Int, digits: Int) {
                    var rest = value
                    for offset in 0..<digits {
                        bytes[end - offset] = UInt8(ascii: "0") + UInt8(rest % 10)
                        rest /= 10
                    }
                }
                put(year, at: 3, digits: 4)
                put(month, at: 6, digits: 2)
                put(day, at: 9, digits: 2)
                put(secondsOfDay / 3600, at: 12, digits: 2)
                put(secondsOfDay % 3600 / 60, at: 15, digits: 2)
                put(secondsOfDay % 60, at: 18, digits: 2)
                (bytes[4], bytes[7], bytes[10]) = (UInt8(ascii: "-"), UInt8(ascii: "-"), UInt8(ascii: "T"))
                (bytes[13], bytes[16], bytes[19]) = (UInt8(ascii: ":"), UInt8(ascii: ":"), UInt8(ascii: "Z"))
                return 20
            }
        }
        func two(_ value: Int64) -> String { value < 10 ? "0\(value)" : "\(value)" }
        let yearText = String(year)
        let paddedYear = String(repeating: "0", count: max(0, 4 - yearText.count)) + yearText
        return "\(paddedYear)-\(two(month))-\(two(day))T\(two(secondsOfDay / 3600)):"
            + "\(two(secondsOfDay % 3600 / 60)):\(two(secondsOfDay % 60))Z"
    }

    /// Parses exactly `YYYY-MM-DDTHH:MM:SSZ`; nil for anything else or an impossible date.
    package static func parse(_ text: String) -> Date? {
        guard let seconds = parseUnixSeconds(text) else { return nil }
        return Date(timeIntervalSince1970: TimeInterval(seconds))
    }

    /// Parses exactly `YYYY-MM-DDTHH:MM:SSZ` to seconds since 1970.
    package static func parseUnixSeconds(_ text: String) -> Int64? {
        let bytes = Array(text.utf8)
        guard bytes.count == 20, bytes[4] == UInt8(ascii: "-"), bytes[7] == UInt8(ascii: "-"),
            bytes[10] == UInt8(ascii: "T"), bytes[13] == UInt8(ascii: ":"), bytes[16] == UInt8(ascii: ":"),
            bytes[19] == UInt8(ascii: "Z")
        else { return nil }
        func number(_ range: Range<Int>) -> Int64? {
            var value: Int64 = 0
            for index in range {
                let byte = bytes[index]
                guard byte >= 0x30, byte <= 0x39 else { return nil }
                value = value * 10 + Int64(byte - 0x30)
            }
            return value
        }
        guard let year = number(0..<4), let month = number(5..<7), let day = number(8..<10),
            let hour = number(11..<13), let minute = number(14..<16), let second = number(17..<19),
            (1...12).contains(month), (0...23).contains(hour), (0...59).contains(minute),
            (0...59).contains(second)
        else { return nil }
        let days = daysFromCivil(year: year, month: month, day: day)
        // Reject days that do not exist (31 April, 29 February in a common year).
        guard day >= 1, civil(fromDays: days) == (year, month, day) else { return nil }
        return days * 86_400 + hour * 3600 + minute * 60 + second
    }

    // Howard Hinnant's civil-from-days and days-from-civil algorithms (proleptic Gregorian).
    private static func civil(fromDays days: Int64) -> (Int64, Int64, Int64) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let day = doy - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        return (yoe + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }

    private static func daysFromCivil(year: Int64, month: Int64, day: Int64) -> Int64 {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let doy = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }
}
