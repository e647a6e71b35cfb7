// swift-tools-version:6.0
import PackageDescription

// The Keybound example app's code, as a library so that it is type-checked without Xcode
// (`apple-sdk-check` builds every target with "Apple" in its name). The app itself is an Xcode
// iOS App target holding `App/Main.swift` and `App/Info.plist`; see README.md.
let package = Package(
    name: "KeyboundExample",
    platforms: [.iOS(.v17), .macOS(.v14)],
    products: [
        .library(name: "KeyboundExampleApple", targets: ["KeyboundExampleApple"])
    ],
    dependencies: [
        .package(name: "Keybound", path: "../..")
    ],
    targets: [
        .target(
            name: "KeyboundExampleApple",
            dependencies: [
                .product(name: "Keybound", package: "Keybound"),
                .product(name: "KeyboundApple", package: "Keybound"),
            ])
    ],
    swiftLanguageModes: [.v6]
)
