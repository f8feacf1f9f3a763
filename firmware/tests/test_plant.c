/* Unit tests of the simulated bench's plant model (host only; floating point). */
#include <math.h>

#include "plant.h"
#include "test_util.h"

void run_plant_tests(void);

static struct plant make(double inertia, double viscous, double coulomb, double velocity)
{
    struct plant_params p = plant_default_params();
    struct plant plant;
    p.inertia_kg_m2 = inertia;
    p.viscous_nm_s_per_rad = viscous;
    p.coulomb_nm = coulomb;
    plant_init(&plant, p);
    plant.velocity_rad_s = velocity;
    return plant;
}

static void test_sticks_below_coulomb(void)
{
    struct plant plant = make(1.0, 1.0, 2.0, 0.0);
    for (int i = 0; i < 1000; i++) {
        plant_step(&plant, 1.9, 1e-3);
    }
    CHECK(plant.velocity_rad_s == 0.0);
    CHECK(plant.position_rad == 0.0);
}

static void test_breakaway_matches_analytic_solution(void)
{
    /* J dω/dt = 10 − 2 − ω from rest: ω(t) = 8 (1 − e^−t). */
    struct plant plant = make(1.0, 1.0, 2.0, 0.0);
    for (int i = 0; i < 1000; i++) {
        plant_step(&plant, 10.0, 1e-3);
    }
    double exact = 8.0 * (1.0 - exp(-1.0));
    CHECK(fabs(plant.velocity_rad_s - exact) < 0.005 * exact);
}

static void test_coulomb_stops_without_chatter(void)
{
    /* ω0 = 1 rad/s, only Coulomb (2 N·m on 1 kg·m²): stops at t = 0.5 s after 0.25 rad. */
    struct plant plant = make(1.0, 0.0, 2.0, 1.0);
    for (int i = 0; i < 250; i++) {
        plant_step(&plant, 0.0, 1e-3);
    }
    CHECK(fabs(plant.velocity_rad_s - 0.5) < 1e-3);
    for (int i = 0; i < 350; i++) {
        plant_step(&plant, 0.0, 1e-3);
    }
    CHECK(plant.velocity_rad_s == 0.0);
    CHECK(fabs(plant.position_rad - 0.25) < 1e-3);
    double rest = plant.position_rad;
    for (int i = 0; i < 1000; i++) {
        plant_step(&plant, 0.0, 1e-3);
    }
    CHECK(plant.velocity_rad_s == 0.0);
    CHECK(plant.position_rad == rest);
}

static void test_implicit_step_is_stable_at_huge_steps(void)
{
    /* Explicit Euler would flip sign (and grow) with h·b/J = 50; the implicit step decays. */
    double v = plant_implicit_velocity(1.0, 50.0, 0.0, 1.0, 0.0, 1.0);
    CHECK(v > 0.0 && v < 1.0 / 50.0);
}

static void test_motor_limit_and_encoder(void)
{
    struct plant plant = make(1.0, 1.0, 2.0, 0.0);
    plant_step(&plant, 500.0, 1e-3);
    CHECK(plant.applied_torque_nm == 150.0);
    plant_step(&plant, -500.0, 1e-3);
    CHECK(plant.applied_torque_nm == -150.0);

    plant.p.encoder_counts = 4096;
    plant.position_rad = 0.001; /* 0.65 count */
    CHECK_EQ(plant_encoder_urad(&plant), 0);
    plant.position_rad = 0.01; /* 6.52 counts → 6 counts = 6·2π/4096 rad */
    CHECK_EQ(plant_encoder_urad(&plant), 9204);
    plant.position_rad = -0.001; /* −0.65 count → −1 count */
    CHECK_EQ(plant_encoder_urad(&plant), -1534);
}

void run_plant_tests(void)
{
    test_sticks_below_coulomb();
    test_breakaway_matches_analytic_solution();
    test_coulomb_stops_without_chatter();
    test_implicit_step_is_stable_at_huge_steps();
    test_motor_limit_and_encoder();
}
