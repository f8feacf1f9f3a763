/* Plant model of the simulated bench (host only, floating point is fine here — not firmware):
 * one shoulder-flexion axis, rotor + arms inertia, viscous and Coulomb friction, motor torque
 * limit, optional gravity moment, quantising absolute encoder. SI units throughout. */
#ifndef BM_PLANT_H
#define BM_PLANT_H

#include <stdint.h>

struct plant_params {
    double inertia_kg_m2;        /* rotor + arm inertia about the axis */
    double viscous_nm_s_per_rad; /* viscous friction coefficient */
    double coulomb_nm;           /* Coulomb friction magnitude */
    double torque_limit_nm;      /* the motor cannot produce more than this */
    double gravity_moment_nm;    /* m·g·l of the arms; torque −m·g·l·sin(θ) (0 = none) */
    int32_t encoder_counts;      /* counts per revolution */
    double initial_position_rad;
    int substeps;                /* integration substeps per 1 ms tick */
};

struct plant {
    struct plant_params p;
    double position_rad;
    double velocity_rad_s;
    double applied_torque_nm; /* motor torque after the motor limit */
    double external_torque_nm; /* any other torque on the axis (the simulated load; 0 = none) */
};

struct plant_params plant_default_params(void);
void plant_init(struct plant *plant, struct plant_params params);
/* Advance by dt_s with the commanded motor torque (N·m); friction is treated implicitly. */
void plant_step(struct plant *plant, double torque_command_nm, double dt_s);
/* One implicit step of J·dω/dt = τ − b·ω − Fc·sign(ω): returns ω at the end of the step. The
 * Coulomb term is set-valued at ω = 0 (sticks when |J·ω/h + τ| ≤ Fc), so there is no chatter. */
double plant_implicit_velocity(double inertia, double viscous, double coulomb, double velocity,
                               double torque, double dt_s);
/* Encoder reading quantised to whole counts, in µrad. */
int32_t plant_encoder_urad(const struct plant *plant);

#endif /* BM_PLANT_H */
