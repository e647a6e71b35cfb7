// swift-tools-version:6.0
import PackageDescription

// The Keybound example app as two libraries:
// - KeyboundExampleApple: the app's state and every Keybound call (login, Face ID, approvals,
//   app lock). `apple-sdk-check` type-checks it for iOS and macOS.
// - KeyboundExampleUI: the SwiftUI screens. Built by Xcode; the Linux SDK check cannot import
//   SwiftUI (see README.md), which is why it is a separate target without "Apple" in its name.
// The app itself is an Xcode iOS App target holding `App/Main.swift` and `App/Info.plist`.
let package = Package(
    name: "KeyboundExample",
    platforms: [.iOS(.v17), .macOS(.v14)],
    products: [
        .library(name: "KeyboundExampleApple", targets: ["KeyboundExampleApple"]),
        .library(name: "KeyboundExampleUI", targets: ["KeyboundExampleUI"]),
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
            ]),
        .target(
            name: "KeyboundExampleUI",
            dependencies: [
                "KeyboundExampleApple",
                .product(name: "Keybound", package: "Keybound"),
            ]),
    ],
    swiftLanguageModes: [.v6]
)
