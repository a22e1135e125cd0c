console.log("ROOT INSTALL RAN")
